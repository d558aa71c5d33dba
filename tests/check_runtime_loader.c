/* check_runtime_loader.c - libfadsl without a GPU: the no-driver path (real
 * where there is no driver, forced with FADSL_NO_DRIVER=1 or the loader
 * option everywhere), compile-only contexts, NVRTC loading and its
 * FADSL_NVRTC_PATH override, the device-arch rule. */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "rt.h"

/* LeakSanitizer (sanitizer builds): NVRTC and the CUDA driver keep allocations
 * for the life of the process (their caches, the C++ runtime NVRTC brings),
 * which are not leaks of fadsl's.  Only reports whose allocation stack passes
 * through those two libraries are suppressed. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libnvrtc\nleak:libcuda\n"; }

static const char *no_driver_prefix = "no CUDA driver found (libcuda.so.1 could not be loaded: ";

/* Every device operation fails with `st` and the same message. */
static void expect_device_calls_fail(fadsl_context *ctx, fadsl_status st, const char *needle) {
  uint64_t p = 1;
  ck_assert_int_eq(fadsl_malloc(ctx, 1024, &p), st);
  ck_assert_uint_eq(p, 0);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), needle));
  fadsl_device_info info;
  ck_assert_int_eq(fadsl_context_device_info(ctx, &info), st);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), needle));
  ck_assert_int_eq(fadsl_memset(ctx, 0x1000, 0, 16), st);
  ck_assert_int_eq(fadsl_synchronize(ctx, NULL), st);
  void *ev = (void *)1;
  ck_assert_int_eq(fadsl_event_create(ctx, &ev), st);
  size_t fr, tot;
  ck_assert_int_eq(fadsl_mem_info(ctx, &fr, &tot), st);
  char buf[8];
  ck_assert_int_eq(fadsl_memcpy_dtoh(ctx, buf, 0x1000, sizeof buf), st);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), needle));
}

START_TEST(test_forced_no_driver) {
  setenv("FADSL_NO_DRIVER", "1", 1);
  fadsl_context *ctx = NULL;
  fadsl_status st = fadsl_context_create(0, &ctx);
  ck_assert_int_eq(st, FADSL_ERROR_NO_DRIVER);
  ck_assert_ptr_nonnull(ctx);   /* still handed back, with the reason */
  const char *e = fadsl_context_last_error(ctx);
  ck_assert_msg(strncmp(e, no_driver_prefix, strlen(no_driver_prefix)) == 0, "message: %s", e);
  ck_assert_ptr_nonnull(strstr(e, "FADSL_NO_DRIVER"));
  ck_assert_int_eq(fadsl_context_device(ctx), 0);
  expect_device_calls_fail(ctx, FADSL_ERROR_NO_DRIVER, no_driver_prefix);
  fadsl_context_destroy(ctx);
  unsetenv("FADSL_NO_DRIVER");
}
END_TEST

START_TEST(test_loader_option) {
  unsetenv("FADSL_NO_DRIVER");
  FaCudaLoader l;
  fa_loader_init(&l, FA_LOADER_NO_DRIVER);
  const char *why = NULL;
  bool no_device = true;
  ck_assert_ptr_null(fa_loader_driver(&l, &why, &no_device));
  ck_assert_ptr_nonnull(why);
  ck_assert(strncmp(why, no_driver_prefix, strlen(no_driver_prefix)) == 0);
  ck_assert(!no_device);
  /* asking again gives the same answer, without trying again */
  const char *again = NULL;
  ck_assert_ptr_null(fa_loader_driver(&l, &again, NULL));
  ck_assert_str_eq(again, why);
  fa_loader_free(&l);
}
END_TEST

/* Without forcing: on a machine without libcuda.so.1 the message carries
 * the loader's own reason. */
START_TEST(test_real_no_driver) {
  unsetenv("FADSL_NO_DRIVER");
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    fprintf(stderr, "check_runtime_loader: libcuda.so.1 is present; the real no-driver case "
                    "is covered by the forced one\n");
    return;
  }
  const char *reason = dlerror();
  char expect[512];
  snprintf(expect, sizeof expect, "%s%s)", no_driver_prefix, reason ? reason : "");
  fadsl_context *ctx = NULL;
  ck_assert_int_eq(fadsl_context_create(0, &ctx), FADSL_ERROR_NO_DRIVER);
  ck_assert_ptr_nonnull(ctx);
  ck_assert_str_eq(fadsl_context_last_error(ctx), expect);
  expect_device_calls_fail(ctx, FADSL_ERROR_NO_DRIVER, no_driver_prefix);
  fadsl_context_destroy(ctx);
}
END_TEST

START_TEST(test_compile_only_context) {
  fadsl_context *ctx = NULL;
  ck_assert_int_eq(fadsl_context_create(-1, &ctx), FADSL_SUCCESS);
  ck_assert_ptr_nonnull(ctx);
  ck_assert_int_eq(fadsl_context_device(ctx), -1);
  ck_assert_str_eq(fadsl_context_last_error(ctx), "");
  expect_device_calls_fail(ctx, FADSL_ERROR_NO_DEVICE, "device -1");
  fadsl_context_destroy(ctx);
}
END_TEST

START_TEST(test_bad_arguments) {
  fadsl_context *ctx = (fadsl_context *)1;
  ck_assert_int_eq(fadsl_context_create(-2, &ctx), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_ptr_null(ctx);
  ck_assert_int_eq(fadsl_context_create(0, NULL), FADSL_ERROR_INVALID_ARGUMENT);
  fadsl_context_destroy(NULL);
  ck_assert_str_eq(fadsl_context_last_error(NULL), "no context");
  ck_assert_int_eq(fadsl_malloc(NULL, 16, NULL), FADSL_ERROR_INVALID_ARGUMENT);
  for (int s = FADSL_SUCCESS; s <= FADSL_ERROR_UNSUPPORTED; s++) {
    const char *text = fadsl_status_string((fadsl_status)s);
    ck_assert(text && *text && strcmp(text, "unknown status") != 0);
  }
  ck_assert_str_eq(fadsl_status_string((fadsl_status)999), "unknown status");
  ck_assert_str_eq(fadsl_version(), PACKAGE_VERSION);
}
END_TEST

START_TEST(test_nvrtc_loads) {
  fadsl_context *ctx = NULL;
  ck_assert_int_eq(fadsl_context_create(-1, &ctx), FADSL_SUCCESS);
  const FaNvrtcApi *api = NULL;
  ck_assert_int_eq(fa_rt_nvrtc(ctx, &api), FADSL_SUCCESS);
  ck_assert_ptr_nonnull(api);
  ck_assert_int_ge(api->major, 12);
  ck_assert_ptr_nonnull(api->nvrtcCompileProgram);
  ck_assert_ptr_nonnull(api->nvrtcGetCUBIN);
  ck_assert(fa_nvrtc_supports_sm(api, 80));
  ck_assert(fa_nvrtc_supports_sm(api, 90));
  ck_assert(!fa_nvrtc_supports_sm(api, 11));
  fadsl_context_destroy(ctx);
}
END_TEST

START_TEST(test_nvrtc_path_override) {
  /* find where the default search found libnvrtc */
  FaCudaLoader l;
  fa_loader_init(&l, 0);
  const char *why = NULL;
  const FaNvrtcApi *api = fa_loader_nvrtc(&l, &why);
  ck_assert_msg(api != NULL, "%s", why ? why : "");
  Dl_info info;
  void *fn;
  memcpy(&fn, &api->nvrtcVersion, sizeof fn);
  ck_assert(dladdr(fn, &info) != 0 && info.dli_fname);
  char *path = strdup(info.dli_fname);
  char *dir = strdup(info.dli_fname);
  fa_loader_free(&l);

  /* a bad override is an error that names it, not a silent fallback */
  setenv("FADSL_NVRTC_PATH", "/nonexistent/libnvrtc.so.13", 1);
  fa_loader_init(&l, 0);
  ck_assert_ptr_null(fa_loader_nvrtc(&l, &why));
  ck_assert_ptr_nonnull(strstr(why, "FADSL_NVRTC_PATH=/nonexistent/libnvrtc.so.13"));
  fa_loader_free(&l);

  /* a file */
  setenv("FADSL_NVRTC_PATH", path, 1);
  fa_loader_init(&l, 0);
  api = fa_loader_nvrtc(&l, &why);
  ck_assert_msg(api != NULL, "%s", why ? why : "");
  ck_assert_str_eq(api->path, path);
  fa_loader_free(&l);

  /* a directory */
  setenv("FADSL_NVRTC_PATH", dirname(dir), 1);
  fa_loader_init(&l, 0);
  api = fa_loader_nvrtc(&l, &why);
  ck_assert_msg(api != NULL, "%s", why ? why : "");
  ck_assert(strncmp(api->path, dir, strlen(dir)) == 0);
  fa_loader_free(&l);
  unsetenv("FADSL_NVRTC_PATH");
  free(path);
  free(dir);
}
END_TEST

START_TEST(test_arch_rule) {
  char a[16];
  fa_rt_arch_for_cc(9, 0, a, sizeof a);
  ck_assert_str_eq(a, "sm_90a");
  fa_rt_arch_for_cc(8, 0, a, sizeof a);
  ck_assert_str_eq(a, "sm_80");
  fa_rt_arch_for_cc(8, 6, a, sizeof a);
  ck_assert_str_eq(a, "sm_86");
  fa_rt_arch_for_cc(8, 9, a, sizeof a);
  ck_assert_str_eq(a, "sm_89");
  fa_rt_arch_for_cc(10, 0, a, sizeof a);
  ck_assert_str_eq(a, "sm_100");
  int sm;
  bool spec;
  ck_assert(fa_arch_parse("sm_90a", &sm, &spec) && sm == 90 && spec);
  ck_assert(fa_arch_parse("compute_80", &sm, &spec) && sm == 80 && !spec);
  ck_assert(fa_arch_parse("sm_120", &sm, &spec) && sm == 120 && !spec);
  ck_assert(!fa_arch_parse("sm_9", &sm, &spec));
  ck_assert(!fa_arch_parse("sm_90b", &sm, &spec));
  ck_assert(!fa_arch_parse("gfx90a", &sm, &spec));
  ck_assert(!fa_arch_parse(NULL, &sm, &spec));
}
END_TEST

int main(void) {
  Suite *s = suite_create("runtime_loader");
  TCase *tc = tcase_create("loader");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_forced_no_driver);
  tcase_add_test(tc, test_loader_option);
  tcase_add_test(tc, test_real_no_driver);
  tcase_add_test(tc, test_compile_only_context);
  tcase_add_test(tc, test_bad_arguments);
  tcase_add_test(tc, test_nvrtc_loads);
  tcase_add_test(tc, test_nvrtc_path_override);
  tcase_add_test(tc, test_arch_rule);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
