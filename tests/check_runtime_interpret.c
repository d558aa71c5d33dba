/* check_runtime_interpret.c - fadsl_interpret (a kernel on the CPU
 * interpreter over host regions) and fadsl_kernel_param_info, through the
 * public API as a binding layer uses them: results, the configuration rule
 * without a tuning database (explicit, else the space's default under its
 * prune, which reads `arch` as 0; explicit values the prune rejects;
 * nothing passing it), a given
 * grid (in the options or the arguments), threads, and every refusal: a pointer outside the
 * regions, a region smaller than the declared extent, misalignment, an
 * access out of bounds, a failing static_assert, missing arguments. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fadsl.h"

static const char *prog_fa =
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
    "@autotune(A=[32, 64], B=[64, 32], prune=A % B == 0 and A * B <= LIMIT)\n"
    "def pick(out: *i32, LIMIT: constexpr, A: constexpr, B: constexpr):\n"
    "    store(out + arange(0, 2), where(arange(0, 2) == 0, A, B))\n"
    "\n"
    "@kernel(grid=(1,))\n"
    "def overrun(x: *T, n: i32, T: constexpr):\n"
    "    store(x + n + arange(0, 4), zeros((4,), T))\n"
    "\n"
    "@kernel(grid=(1,))\n"
    "def even(x: *f32, N: constexpr):\n"
    "    static_assert(N % 2 == 0, \"N must be even\")\n"
    "    store(x + arange(0, N), zeros((N,), f32))\n"
    "\n"
    "@kernel(grid=(1,))\n"
    "@autotune(A=[90, 80, 0], prune=A == arch)\n"
    "def target(out: *i32, A: constexpr):\n"
    "    store(out + arange(0, 2), zeros((2,), i32) + A)\n";

static fadsl_context *ctx;
static fadsl_program *prog;

static const char *err(void) { return fadsl_context_last_error(ctx); }

static void setup(void) {
  unsetenv("FADSL_LOG");
  ck_assert_int_eq(fadsl_context_create(-1, &ctx), FADSL_SUCCESS);
  fadsl_status st = fadsl_program_load_string(ctx, "interp.fa", prog_fa, &prog);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", err());
}

static void teardown(void) {
  fadsl_program_destroy(prog);
  fadsl_context_destroy(ctx);
}

#define ck_error(call, status, needle)                                                        \
  do {                                                                                       \
    fadsl_status st_ = (call);                                                               \
    ck_assert_msg(st_ == (status), "status %d (%s), want %d; message: %s", st_,              \
                  fadsl_status_string(st_), (status), err());                                \
    ck_assert_msg(strstr(err(), (needle)), "message '%s' lacks '%s'", err(), (needle));       \
  } while (0)

static fadsl_args *args_for(const char *name, fadsl_kernel **k) {
  ck_assert_int_eq(fadsl_program_kernel(prog, name, k), FADSL_SUCCESS);
  fadsl_args *a = NULL;
  ck_assert_int_eq(fadsl_args_create(*k, &a), FADSL_SUCCESS);
  return a;
}

static uint64_t host(const void *p) { return (uint64_t)(uintptr_t)p; }

enum { N = 1000 };

/* Binds scale(x, y, a, n) over fresh arrays and returns the regions. */
static void bind_scale(fadsl_args *a, float *x, float *y, float factor, int n, fadsl_host_region r[2]) {
  for (int i = 0; i < N; i++) {
    x[i] = (float)i - 500.0f;
    y[i] = -1.0f;
  }
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", host(x)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "y", host(y)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_f32(a, "a", factor), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", n), FADSL_SUCCESS);
  r[0].data = x;
  r[0].bytes = sizeof(float) * N;
  r[1].data = y;
  r[1].bytes = sizeof(float) * N;
}

START_TEST(test_default_config_and_result) {
  fadsl_kernel *k;
  fadsl_args *a = args_for("scale", &k);
  float x[N], y[N];
  fadsl_host_region r[2];
  bind_scale(a, x, y, 3.0f, N, r);
  fadsl_interpret_info info;
  fadsl_status st = fadsl_interpret(k, a, r, 2, NULL, &info);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", err());
  for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], 3.0f * x[i]);
  ck_assert_str_eq(info.constexprs, "BLOCK=128 SQUARE=False");
  ck_assert_str_eq(info.config_source, "default");
  ck_assert_int_eq(info.warps, 4);
  ck_assert_int_eq(info.stages, 2);
  ck_assert_int_eq(info.grid[0], 8);
  ck_assert_int_eq(info.grid[1], 1);
  fadsl_args_destroy(a);
}
END_TEST

START_TEST(test_explicit_config) {
  fadsl_kernel *k;
  fadsl_args *a = args_for("scale", &k);
  float x[N], y[N];
  fadsl_host_region r[2];
  bind_scale(a, x, y, 0.5f, N, r);
  ck_assert_int_eq(fadsl_args_set_int(a, "BLOCK", 256), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_bool(a, "SQUARE", 1), FADSL_SUCCESS);
  fadsl_interpret_info info;
  ck_assert_msg(fadsl_interpret(k, a, r, 2, NULL, &info) == FADSL_SUCCESS, "%s", err());
  ck_assert_str_eq(info.constexprs, "BLOCK=256 SQUARE=True");
  ck_assert_str_eq(info.config_source, "explicit+default");   /* warps still open */
  ck_assert_int_eq(info.grid[0], 4);
  for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], 0.5f * x[i] * x[i]);
  ck_assert_int_eq(fadsl_args_set_config(a, 8, 3), FADSL_SUCCESS);
  ck_assert_msg(fadsl_interpret(k, a, r, 2, NULL, &info) == FADSL_SUCCESS, "%s", err());
  ck_assert_str_eq(info.config_source, "explicit");
  ck_assert_int_eq(info.warps, 8);
  ck_assert_int_eq(info.stages, 3);
  fadsl_args_destroy(a);
}
END_TEST

/* The default is the first point that passes the prune, which may read
 * the launch's other constexprs. */
START_TEST(test_default_under_prune) {
  fadsl_kernel *k;
  fadsl_args *a = args_for("pick", &k);
  int32_t out[2] = {0, 0};
  fadsl_host_region r = {out, sizeof out};
  ck_assert_int_eq(fadsl_args_set_ptr(a, "out", host(out)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_int(a, "LIMIT", 4096), FADSL_SUCCESS);
  fadsl_interpret_info info;
  ck_assert_msg(fadsl_interpret(k, a, &r, 1, NULL, &info) == FADSL_SUCCESS, "%s", err());
  /* (32, 64) fails A % B == 0; (32, 32) passes */
  ck_assert_int_eq(out[0], 32);
  ck_assert_int_eq(out[1], 32);
  fadsl_args_clear(a);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "out", host(out)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_int(a, "LIMIT", 100000), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_int(a, "A", 64), FADSL_SUCCESS);
  ck_assert_msg(fadsl_interpret(k, a, &r, 1, NULL, &info) == FADSL_SUCCESS, "%s", err());
  ck_assert_int_eq(out[0], 64);   /* A fixed: B = 64 is the first that passes */
  ck_assert_int_eq(out[1], 64);
  ck_assert_str_eq(info.config_source, "explicit+default");
  fadsl_args_destroy(a);
}
END_TEST

/* The interpreter is no GPU: a prune reads `arch` as 0 there (sema.h). */
START_TEST(test_prune_sees_no_gpu_target) {
  fadsl_kernel *k;
  fadsl_args *a = args_for("target", &k);
  int32_t out[2] = {-1, -1};
  fadsl_host_region r = {out, sizeof out};
  ck_assert_int_eq(fadsl_args_set_ptr(a, "out", host(out)), FADSL_SUCCESS);
  fadsl_interpret_info info;
  ck_assert_msg(fadsl_interpret(k, a, &r, 1, NULL, &info) == FADSL_SUCCESS, "%s", err());
  ck_assert_int_eq(out[0], 0);
  ck_assert_str_eq(info.constexprs, "A=0");
  ck_assert_str_eq(info.config_source, "default");
  fadsl_args_destroy(a);
}
END_TEST

/* Values given explicitly are taken as given, even where the prune would
 * reject them; when nothing passes the prune with the values given, the open
 * axes take their first values (the runtime's rule; see autotune_point.h). */
START_TEST(test_explicit_rejected_and_none_passes) {
  fadsl_kernel *k;
  fadsl_args *a = args_for("pick", &k);
  int32_t out[2] = {0, 0};
  fadsl_host_region r = {out, sizeof out};
  fadsl_interpret_info info;
  ck_assert_int_eq(fadsl_args_set_ptr(a, "out", host(out)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_int(a, "LIMIT", 4096), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_int(a, "A", 32), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_int(a, "B", 64), FADSL_SUCCESS);   /* 32 % 64 != 0 */
  ck_assert_msg(fadsl_interpret(k, a, &r, 1, NULL, &info) == FADSL_SUCCESS, "%s", err());
  ck_assert_int_eq(out[0], 32);
  ck_assert_int_eq(out[1], 64);
  ck_assert_str_eq(info.config_source, "explicit");
  fadsl_args_clear(a);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "out", host(out)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_int(a, "LIMIT", 100), FADSL_SUCCESS);   /* no A * B is that small */
  ck_assert_msg(fadsl_interpret(k, a, &r, 1, NULL, &info) == FADSL_SUCCESS, "%s", err());
  ck_assert_int_eq(out[0], 32);
  ck_assert_int_eq(out[1], 64);
  ck_assert_str_eq(info.constexprs, "LIMIT=100 A=32 B=64");
  ck_assert_str_eq(info.config_source, "default");
  fadsl_args_destroy(a);
}
END_TEST

/* A grid on the arguments (fadsl_args_set_grid), as fadsl_launch takes it:
 * used instead of the kernel's, after an options grid; a zero dimension
 * runs nothing; fadsl_args_clear forgets it. */
START_TEST(test_args_grid) {
  fadsl_kernel *k;
  fadsl_args *a = args_for("scale", &k);
  float x[N], y[N];
  fadsl_host_region r[2];
  bind_scale(a, x, y, 2.0f, N, r);
  fadsl_interpret_info info;
  ck_assert_int_eq(fadsl_args_set_grid(a, 3, 1, 1), FADSL_SUCCESS);   /* 3 programs of 128 */
  ck_assert_msg(fadsl_interpret(k, a, r, 2, NULL, &info) == FADSL_SUCCESS, "%s", err());
  ck_assert_int_eq(info.grid[0], 3);
  for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], i < 384 ? 2.0f * x[i] : -1.0f);
  fadsl_interpret_options opt;
  memset(&opt, 0, sizeof opt);
  opt.grid[0] = 1;   /* the options' grid comes first */
  ck_assert_msg(fadsl_interpret(k, a, r, 2, &opt, &info) == FADSL_SUCCESS, "%s", err());
  ck_assert_int_eq(info.grid[0], 1);
  for (int i = 0; i < N; i++) y[i] = -1.0f;
  ck_assert_int_eq(fadsl_args_set_grid(a, 4, 0, 1), FADSL_SUCCESS);
  ck_assert_msg(fadsl_interpret(k, a, r, 2, NULL, &info) == FADSL_SUCCESS, "%s", err());
  ck_assert_int_eq(info.grid[0], 4);
  ck_assert_int_eq(info.grid[1], 0);
  for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], -1.0f);   /* nothing ran */
  ck_assert_int_eq(fadsl_args_set_grid(a, 0, 0, 0), FADSL_SUCCESS);   /* nothing either */
  ck_assert_msg(fadsl_interpret(k, a, r, 2, NULL, &info) == FADSL_SUCCESS, "%s", err());
  ck_assert_int_eq(info.grid[0], 0);
  for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], -1.0f);
  ck_error(fadsl_args_set_grid(a, -1, 1, 1), FADSL_ERROR_INVALID_ARGUMENT,
           "kernel 'scale': grid dimension 0 is -1 (must be 0..2147483647)");
  ck_error(fadsl_args_set_grid(a, 1, 70000, 1), FADSL_ERROR_INVALID_ARGUMENT,
           "grid dimension 1 is 70000 (must be 0..65535)");
  ck_assert_int_eq(fadsl_args_set_grid(a, 2, 1, 1), FADSL_SUCCESS);
  fadsl_args_clear(a);
  bind_scale(a, x, y, 2.0f, N, r);
  ck_assert_msg(fadsl_interpret(k, a, r, 2, NULL, &info) == FADSL_SUCCESS, "%s", err());
  ck_assert_int_eq(info.grid[0], 8);
  ck_assert_int_eq(fadsl_args_set_grid(NULL, 1, 1, 1), FADSL_ERROR_INVALID_ARGUMENT);
  fadsl_args_destroy(a);
}
END_TEST

START_TEST(test_given_grid_and_threads) {
  fadsl_kernel *k;
  fadsl_args *a = args_for("scale", &k);
  float x[N], y[N];
  fadsl_host_region r[2];
  bind_scale(a, x, y, 2.0f, N, r);
  fadsl_interpret_options opt;
  memset(&opt, 0, sizeof opt);
  opt.grid[0] = 2;   /* two programs of 128: elements 0..255 */
  fadsl_interpret_info info;
  ck_assert_msg(fadsl_interpret(k, a, r, 2, &opt, &info) == FADSL_SUCCESS, "%s", err());
  ck_assert_int_eq(info.grid[0], 2);
  ck_assert_int_eq(info.grid[1], 1);
  for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], i < 256 ? 2.0f * x[i] : -1.0f);
  memset(&opt, 0, sizeof opt);
  opt.threads = 2;
  ck_assert_msg(fadsl_interpret(k, a, r, 2, &opt, &info) == FADSL_SUCCESS, "%s", err());
  for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], 2.0f * x[i]);
  fadsl_args_destroy(a);
}
END_TEST

START_TEST(test_pointer_refusals) {
  fadsl_kernel *k;
  fadsl_args *a = args_for("scale", &k);
  float x[N], y[N];
  fadsl_host_region r[2];
  bind_scale(a, x, y, 1.0f, N, r);
  ck_error(fadsl_interpret(k, a, r, 1, NULL, NULL), FADSL_ERROR_INVALID_ARGUMENT,
           "argument 'y' (0x");   /* y's region is not given */
  ck_assert_msg(strstr(err(), "lies in none of the 1 host buffers"), "%s", err());
  r[1].bytes = sizeof(float) * (N - 1);
  ck_error(fadsl_interpret(k, a, r, 2, NULL, NULL), FADSL_ERROR_INVALID_ARGUMENT,
           "buffer 'y' is too small: the kernel declares f32[1000] (4000 bytes) but the host buffer "
           "holds 3996 bytes");
  r[1].bytes = sizeof(float) * N;
  fadsl_args_clear(a);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", host((char *)x + 2)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "y", host(y)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_f32(a, "a", 1.0f), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", 10), FADSL_SUCCESS);
  ck_error(fadsl_interpret(k, a, r, 2, NULL, NULL), FADSL_ERROR_INVALID_ARGUMENT,
           "is not aligned to its 4-byte f32 elements");
  fadsl_args_clear(a);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", 0), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "y", host(y)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_f32(a, "a", 1.0f), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", 10), FADSL_SUCCESS);
  ck_error(fadsl_interpret(k, a, r, 2, NULL, NULL), FADSL_ERROR_INVALID_ARGUMENT,
           "argument 'x' is a null pointer");
  fadsl_args_destroy(a);
}
END_TEST

/* A pointer in the middle of a region may reach its end, not further: the
 * access is refused with its location. */
START_TEST(test_access_out_of_bounds) {
  fadsl_kernel *k;
  fadsl_args *a = args_for("overrun", &k);
  uint16_t buf[16];
  memset(buf, 0xff, sizeof buf);
  fadsl_host_region r = {buf, sizeof buf};
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", host(buf + 8)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", 4), FADSL_SUCCESS);   /* elements 12..15: inside */
  ck_assert_int_eq(fadsl_args_set_dtype(a, "T", "f16"), FADSL_SUCCESS);
  ck_assert_msg(fadsl_interpret(k, a, &r, 1, NULL, NULL) == FADSL_SUCCESS, "%s", err());
  for (int i = 0; i < 16; i++) ck_assert_uint_eq(buf[i], i >= 12 ? 0 : 0xffff);
  fadsl_args_clear(a);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", host(buf + 8)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", 5), FADSL_SUCCESS);   /* element 16: past the end */
  ck_assert_int_eq(fadsl_args_set_dtype(a, "T", "f16"), FADSL_SUCCESS);
  ck_error(fadsl_interpret(k, a, &r, 1, NULL, NULL), FADSL_ERROR_PROGRAM, "interp.fa:18:5: error: ");
  ck_assert_msg(strstr(err(), "out of bounds"), "%s", err());
  fadsl_args_destroy(a);
}
END_TEST

START_TEST(test_program_and_binding_errors) {
  fadsl_kernel *k;
  fadsl_args *a = args_for("even", &k);
  float buf[8];
  fadsl_host_region r = {buf, sizeof buf};
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", host(buf)), FADSL_SUCCESS);
  ck_error(fadsl_interpret(k, a, &r, 1, NULL, NULL), FADSL_ERROR_BINDING, "missing argument 'N' (constexpr)");
  ck_assert_int_eq(fadsl_args_set_int(a, "N", 3), FADSL_SUCCESS);
  ck_error(fadsl_interpret(k, a, &r, 1, NULL, NULL), FADSL_ERROR_PROGRAM, "N must be even");
  fadsl_args_destroy(a);
  fadsl_kernel *other;
  fadsl_args *b = args_for("scale", &other);
  ck_error(fadsl_interpret(k, b, &r, 1, NULL, NULL), FADSL_ERROR_INVALID_ARGUMENT,
           "the arguments were made for kernel 'scale', not 'even'");
  ck_assert_int_eq(fadsl_interpret(NULL, b, &r, 1, NULL, NULL), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_int_eq(fadsl_interpret(other, b, NULL, 1, NULL, NULL), FADSL_ERROR_INVALID_ARGUMENT);
  fadsl_args_destroy(b);
}
END_TEST

START_TEST(test_param_info) {
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(prog, "scale", &k), FADSL_SUCCESS);
  fadsl_param_info p;
  ck_assert_int_eq(fadsl_kernel_param_info(k, 0, &p), FADSL_SUCCESS);
  ck_assert_str_eq(p.name, "x");
  ck_assert_int_eq(p.kind, FADSL_PARAM_POINTER);
  ck_assert_str_eq(p.dtype, "f32");
  ck_assert_ptr_null(p.dtype_param);
  ck_assert_int_eq(fadsl_kernel_param_info(k, 3, &p), FADSL_SUCCESS);
  ck_assert_str_eq(p.name, "n");
  ck_assert_int_eq(p.kind, FADSL_PARAM_SCALAR);
  ck_assert_str_eq(p.dtype, "i32");
  ck_assert_int_eq(fadsl_kernel_param_info(k, 4, &p), FADSL_SUCCESS);
  ck_assert_str_eq(p.name, "BLOCK");
  ck_assert_int_eq(p.kind, FADSL_PARAM_CONSTEXPR);
  ck_assert_int_eq(p.tunable, 1);
  ck_assert_int_eq(p.has_default, 0);
  ck_assert_int_eq(fadsl_kernel_param_info(k, 5, &p), FADSL_SUCCESS);
  ck_assert_str_eq(p.name, "SQUARE");
  ck_assert_int_eq(p.tunable, 0);
  ck_assert_int_eq(p.has_default, 1);
  ck_assert_int_eq(fadsl_kernel_param_info(k, 6, &p), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_int_eq(fadsl_program_kernel(prog, "overrun", &k), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_kernel_param_info(k, 0, &p), FADSL_SUCCESS);
  ck_assert_ptr_null(p.dtype);
  ck_assert_str_eq(p.dtype_param, "T");
}
END_TEST

int main(void) {
  Suite *s = suite_create("runtime_interpret");
  TCase *tc = tcase_create("interpret");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_default_config_and_result);
  tcase_add_test(tc, test_explicit_config);
  tcase_add_test(tc, test_default_under_prune);
  tcase_add_test(tc, test_prune_sees_no_gpu_target);
  tcase_add_test(tc, test_given_grid_and_threads);
  tcase_add_test(tc, test_explicit_rejected_and_none_passes);
  tcase_add_test(tc, test_args_grid);
  tcase_add_test(tc, test_pointer_refusals);
  tcase_add_test(tc, test_access_out_of_bounds);
  tcase_add_test(tc, test_program_and_binding_errors);
  tcase_add_test(tc, test_param_info);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
