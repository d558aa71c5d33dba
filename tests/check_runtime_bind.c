/* check_runtime_bind.c - binding kernel arguments by name and position, and
 * every binding error: unknown name, position out of range, wrong kind,
 * duplicate, missing.  The kernel description (FaKernelInfo, what
 * fa_program_check hands over) is built by hand, so these tests need only
 * the runtime. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rt_program.h"

/* def k(t_q: *T, n: i32, scale: f32, big: i64, eps: f64, x: T,
 *       T: constexpr, BLOCK: constexpr, causal: constexpr = False)
 * @autotune(BLOCK=[64, 128], warps=[4, 8]) */
static FaParamInfo params[] = {
    {"t_q", PARAM_POINTER, DT_VOID, "T", false, {0}, NULL},
    {"n", PARAM_SCALAR, DT_I32, NULL, false, {0}, NULL},
    {"scale", PARAM_SCALAR, DT_F32, NULL, false, {0}, NULL},
    {"big", PARAM_SCALAR, DT_I64, NULL, false, {0}, NULL},
    {"eps", PARAM_SCALAR, DT_F64, NULL, false, {0}, NULL},
    {"x", PARAM_SCALAR, DT_VOID, "T", false, {0}, NULL},
    {"T", PARAM_CONSTEXPR, DT_VOID, NULL, false, {0}, NULL},
    {"BLOCK", PARAM_CONSTEXPR, DT_VOID, NULL, false, {0}, NULL},
    {"causal", PARAM_CONSTEXPR, DT_VOID, NULL, true, {CK_BOOL, 0, 0, DT_VOID, NULL}, NULL},
};
static FaConst block_values[] = {{CK_INT, 64, 0, DT_VOID, NULL}, {CK_INT, 128, 0, DT_VOID, NULL}};
static FaConst warp_values[] = {{CK_INT, 4, 0, DT_VOID, NULL}, {CK_INT, 8, 0, DT_VOID, NULL}};
static FaTuneAxis axes[] = {{"BLOCK", block_values, 2}, {"warps", warp_values, 2}};

static fadsl_context *ctx;
static FaKernelInfo info;
static struct fadsl_program prog;
static struct fadsl_kernel kernel;
static fadsl_args *args;

static void setup(void) {
  ck_assert_int_eq(fadsl_context_create(-1, &ctx), FADSL_SUCCESS);
  memset(&info, 0, sizeof info);
  info.name = "k";
  info.params = params;
  info.nparams = FA_ARRAY_LEN(params);
  info.tune = axes;
  info.ntune = 2;
  memset(&prog, 0, sizeof prog);
  prog.ctx = ctx;
  prog.name = "test.fa";
  memset(&kernel, 0, sizeof kernel);
  kernel.program = &prog;
  kernel.info = &info;
  ck_assert_int_eq(fadsl_args_create(&kernel, &args), FADSL_SUCCESS);
}

static void teardown(void) {
  fadsl_args_destroy(args);
  fadsl_context_destroy(ctx);
}

#define ck_error(call, status, needle)                                                      \
  do {                                                                                     \
    ck_assert_int_eq((call), (status));                                                    \
    ck_assert_msg(strstr(fadsl_context_last_error(ctx), (needle)), "message '%s' lacks '%s'", \
                  fadsl_context_last_error(ctx), (needle));                                \
  } while (0)

static void bind_all(void) {
  ck_assert_int_eq(fadsl_args_set_ptr(args, "t_q", 0x7000), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(args, "n", 77), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_f32(args, "scale", 0.125f), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i64(args, "big", 1LL << 40), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_f64(args, "eps", 1e-9), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set(args, "x", fadsl_f32(2.0f)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_dtype(args, "T", "f16"), FADSL_SUCCESS);
}

START_TEST(test_bind_by_name_and_position) {
  bind_all();
  ck_assert_int_eq(fa_rt_args_check_complete(args, false), FADSL_SUCCESS);
  ck_assert_uint_eq(args->args[0].value.v.ptr, 0x7000);
  ck_assert_int_eq(args->args[1].value.v.i32, 77);
  ck_assert_int_eq(args->args[3].value.v.i64, 1LL << 40);
  ck_assert_str_eq(args->args[6].value.v.dtype, "f16");
  /* the dtype name was copied */
  char name[8] = "bf16";
  fadsl_args_clear(args);
  ck_assert_int_eq(fadsl_args_set_at(args, 6, fadsl_dtype(name)), FADSL_SUCCESS);
  name[0] = 'X';
  ck_assert_str_eq(args->args[6].value.v.dtype, "bf16");
  ck_assert_int_eq(fadsl_args_set_at(args, 0, fadsl_ptr(0x10)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_at(args, 7, fadsl_int(128)), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_at(args, 8, fadsl_bool(1)), FADSL_SUCCESS);
  ck_assert_int_eq(args->args[8].value.v.i64, 1);
  ck_assert_int_eq(fadsl_args_set_float(args, "eps", 0.5), FADSL_ERROR_BINDING);   /* f64 scalar */
  ck_assert_int_eq(fadsl_args_set(args, "eps", fadsl_f64(0.5)), FADSL_SUCCESS);
}
END_TEST

START_TEST(test_unknown_and_out_of_range) {
  ck_error(fadsl_args_set_i32(args, "nope", 1), FADSL_ERROR_BINDING,
           "kernel 'k' has no parameter 'nope' (its parameters: t_q, n, scale, big, eps, x, T, "
           "BLOCK, causal)");
  ck_error(fadsl_args_set_at(args, 9, fadsl_i32(1)), FADSL_ERROR_BINDING,
           "kernel 'k' has 9 parameters; there is no position 9");
  ck_error(fadsl_args_set_at(args, -1, fadsl_i32(1)), FADSL_ERROR_BINDING, "no position -1");
  /* case matters */
  ck_error(fadsl_args_set_int(args, "block", 64), FADSL_ERROR_BINDING, "no parameter 'block'");
  ck_assert_int_eq(fadsl_args_set(NULL, "n", fadsl_i32(1)), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_int_eq(fadsl_args_set(args, NULL, fadsl_i32(1)), FADSL_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_wrong_kind) {
  ck_error(fadsl_args_set_i64(args, "t_q", 0x7000), FADSL_ERROR_BINDING,
           "argument 't_q' of kernel 'k' is a pointer and takes a device pointer (FADSL_ARG_PTR), "
           "not an i64 (FADSL_ARG_I64)");
  ck_error(fadsl_args_set_i64(args, "n", 5), FADSL_ERROR_BINDING,
           "argument 'n' of kernel 'k' is a runtime scalar and takes an i32 (FADSL_ARG_I32), not "
           "an i64 (FADSL_ARG_I64)");
  ck_error(fadsl_args_set_int(args, "n", 5), FADSL_ERROR_BINDING, "not a constexpr int");
  ck_error(fadsl_args_set_ptr(args, "n", 5), FADSL_ERROR_BINDING, "not a device pointer");
  ck_error(fadsl_args_set_f64(args, "scale", 1.0), FADSL_ERROR_BINDING,
           "takes an f32 (FADSL_ARG_F32), not an f64 (FADSL_ARG_F64)");
  ck_error(fadsl_args_set_i32(args, "big", 1), FADSL_ERROR_BINDING, "takes an i64");
  ck_error(fadsl_args_set_ptr(args, "x", 1), FADSL_ERROR_BINDING,
           "takes a scalar (FADSL_ARG_I32/I64/F32/F64)");
  ck_error(fadsl_args_set_i32(args, "BLOCK", 64), FADSL_ERROR_BINDING,
           "argument 'BLOCK' of kernel 'k' is a constexpr and takes FADSL_ARG_INT, FADSL_ARG_FLOAT, "
           "FADSL_ARG_BOOL or FADSL_ARG_DTYPE, not an i32 (FADSL_ARG_I32)");
  ck_error(fadsl_args_set_ptr(args, "T", 1), FADSL_ERROR_BINDING, "is a constexpr");
  ck_error(fadsl_args_set_dtype(args, "T", NULL), FADSL_ERROR_BINDING, "is not a dtype");
  ck_error(fadsl_args_set_dtype(args, "T", "a-very-long-dtype-name"), FADSL_ERROR_BINDING,
           "is not a dtype");
  ck_error(fadsl_args_set(args, "n", (fadsl_value){.kind = (fadsl_arg_kind)99}), FADSL_ERROR_BINDING,
           "an unknown kind of value");
  /* nothing got bound by the failures */
  for (int i = 0; i < args->nargs; i++) ck_assert(!args->args[i].bound);
}
END_TEST

START_TEST(test_duplicate) {
  ck_assert_int_eq(fadsl_args_set_i32(args, "n", 1), FADSL_SUCCESS);
  ck_error(fadsl_args_set_i32(args, "n", 2), FADSL_ERROR_BINDING,
           "argument 'n' (position 1) of kernel 'k' is already bound");
  ck_error(fadsl_args_set_at(args, 1, fadsl_i32(2)), FADSL_ERROR_BINDING, "already bound");
  ck_assert_int_eq(args->args[1].value.v.i32, 1);   /* the first value stays */
  fadsl_args_clear(args);
  ck_assert_int_eq(fadsl_args_set_i32(args, "n", 2), FADSL_SUCCESS);
  ck_assert_int_eq(args->args[1].value.v.i32, 2);
}
END_TEST

START_TEST(test_missing) {
  /* nothing bound: every pointer and scalar, and T; not BLOCK (tuned) nor
   * causal (default) */
  ck_error(fa_rt_args_check_complete(args, false), FADSL_ERROR_BINDING,
           "kernel 'k': missing arguments 't_q' (pointer), 'n' (scalar), 'scale' (scalar), 'big' "
           "(scalar), 'eps' (scalar), 'x' (scalar), 'T' (constexpr)");
  ck_assert_ptr_null(strstr(fadsl_context_last_error(ctx), "BLOCK"));
  ck_assert_ptr_null(strstr(fadsl_context_last_error(ctx), "causal"));
  /* compiling needs only the constexprs */
  ck_error(fa_rt_args_check_complete(args, true), FADSL_ERROR_BINDING,
           "kernel 'k': missing argument 'T' (constexpr)");
  ck_assert_int_eq(fadsl_args_set_dtype(args, "T", "f16"), FADSL_SUCCESS);
  ck_assert_int_eq(fa_rt_args_check_complete(args, true), FADSL_SUCCESS);
  ck_error(fa_rt_args_check_complete(args, false), FADSL_ERROR_BINDING, "missing arguments 't_q'");
  fadsl_args_clear(args);
  bind_all();
  ck_assert_int_eq(fa_rt_args_check_complete(args, false), FADSL_SUCCESS);
}
END_TEST

START_TEST(test_config_and_introspection) {
  ck_assert_int_eq(fadsl_args_set_config(args, 8, 3), FADSL_SUCCESS);
  ck_assert_int_eq(args->config.warps, 8);
  ck_assert_int_eq(args->config.stages, 3);
  ck_error(fadsl_args_set_config(args, 3, 2), FADSL_ERROR_INVALID_ARGUMENT, "power of two");
  ck_error(fadsl_args_set_config(args, 64, 2), FADSL_ERROR_INVALID_ARGUMENT, "power of two");
  ck_error(fadsl_args_set_config(args, 4, -1), FADSL_ERROR_INVALID_ARGUMENT, "stages");
  /* a refused pair leaves the configuration as it was */
  ck_assert_int_eq(args->config.warps, 8);
  ck_assert_int_eq(args->config.stages, 3);
  /* one axis by name, as the table of axes names them */
  ck_assert_int_eq(fadsl_args_set_config_axis(args, "stages", 4), FADSL_SUCCESS);
  ck_assert_int_eq(args->config.stages, 4);
  ck_assert_int_eq(args->config.warps, 8);
  ck_error(fadsl_args_set_config_axis(args, "stages", 17), FADSL_ERROR_INVALID_ARGUMENT, "from 1 to 16");
  ck_error(fadsl_args_set_config_axis(args, "BLOCK_Q", 64), FADSL_ERROR_INVALID_ARGUMENT,
           "not a launch-configuration axis (warps, stages, pipeline, schedule)");
  ck_assert_int_eq(fadsl_args_set_config(args, 0, 0), FADSL_SUCCESS);
  ck_assert_int_eq(args->config.stages, 0);
  ck_assert_int_eq(fadsl_args_set_config(args, 4, 2), FADSL_SUCCESS);
  fadsl_args_clear(args);
  ck_assert_int_eq(args->config.warps, 0);

  ck_assert_str_eq(fadsl_kernel_name(&kernel), "k");
  ck_assert_int_eq(fadsl_kernel_param_count(&kernel), 9);
  const char *name;
  fadsl_param_kind kind;
  ck_assert_int_eq(fadsl_kernel_param(&kernel, 0, &name, &kind), FADSL_SUCCESS);
  ck_assert_str_eq(name, "t_q");
  ck_assert_int_eq(kind, FADSL_PARAM_POINTER);
  ck_assert_int_eq(fadsl_kernel_param(&kernel, 2, &name, &kind), FADSL_SUCCESS);
  ck_assert_int_eq(kind, FADSL_PARAM_SCALAR);
  ck_assert_int_eq(fadsl_kernel_param(&kernel, 8, &name, &kind), FADSL_SUCCESS);
  ck_assert_str_eq(name, "causal");
  ck_assert_int_eq(kind, FADSL_PARAM_CONSTEXPR);
  ck_assert_int_eq(fadsl_kernel_param(&kernel, 9, &name, &kind), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_int_eq(fadsl_kernel_param_count(NULL), 0);

  fadsl_args *other = (fadsl_args *)1;
  ck_assert_int_eq(fadsl_args_create(NULL, &other), FADSL_ERROR_INVALID_ARGUMENT);
  fadsl_args_destroy(NULL);
  fadsl_args_clear(NULL);
}
END_TEST

START_TEST(test_scalar_kinds) {
  ck_assert_int_eq(fa_rt_scalar_arg_kind(DT_I32), FADSL_ARG_I32);
  ck_assert_int_eq(fa_rt_scalar_arg_kind(DT_I1), FADSL_ARG_I32);
  ck_assert_int_eq(fa_rt_scalar_arg_kind(DT_I64), FADSL_ARG_I64);
  ck_assert_int_eq(fa_rt_scalar_arg_kind(DT_F16), FADSL_ARG_F32);
  ck_assert_int_eq(fa_rt_scalar_arg_kind(DT_BF16), FADSL_ARG_F32);
  ck_assert_int_eq(fa_rt_scalar_arg_kind(DT_F64), FADSL_ARG_F64);
  ck_assert_int_eq(fa_rt_scalar_arg_kind(DT_VOID), FADSL_ARG_NONE);
  ck_assert_int_eq(fa_rt_scalar_arg_kind(DT_PTR), FADSL_ARG_NONE);
}
END_TEST

int main(void) {
  Suite *s = suite_create("runtime_bind");
  TCase *tc = tcase_create("bind");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_bind_by_name_and_position);
  tcase_add_test(tc, test_unknown_and_out_of_range);
  tcase_add_test(tc, test_wrong_kind);
  tcase_add_test(tc, test_duplicate);
  tcase_add_test(tc, test_missing);
  tcase_add_test(tc, test_config_and_introspection);
  tcase_add_test(tc, test_scalar_kinds);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
