/* check_tune_timing.c - the parts of fadsl-tune's timing and input data that
 * need no GPU: the screening decision (which candidates get their full
 * runs), the median, the generated buffer contents (the same whatever the
 * number of threads and however a buffer is cut into ranges; normal and
 * uniform as documented; `empty` a NaN), and the output comparison. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

/* ---- the screening decision ---------------------------------------------------------- */

START_TEST(screen_keeps_those_within_the_factor) {
  double ms[] = {2.0, 1.0, 1.5, 1.51, 3.0, 1.2};
  bool keep[6];
  int n = fa_tune_screen(ms, 6, 1.5, -1, keep);
  /* best 1.0: 1.5 is kept (at most 1.5x), 1.51 is not */
  bool want[] = {false, true, true, false, false, true};
  for (int i = 0; i < 6; i++) ck_assert_msg(keep[i] == want[i], "candidate %d: keep %d, want %d", i, keep[i], want[i]);
  ck_assert_int_eq(n, 3);
}
END_TEST

START_TEST(screen_always_keeps_the_default) {
  double ms[] = {5.0, 1.0, 4.0};
  bool keep[3];
  int n = fa_tune_screen(ms, 3, 1.5, 0, keep);
  ck_assert(keep[0]);   /* the default: its full runs give the speed-up */
  ck_assert(keep[1]);
  ck_assert(!keep[2]);
  ck_assert_int_eq(n, 2);
}
END_TEST

START_TEST(screen_skips_untimed) {
  /* < 0 or 0: rejected, or the same code as another; never kept, not the best */
  double ms[] = {-1, 0, 3.0, 4.4, 4.6, -1};
  bool keep[6];
  int n = fa_tune_screen(ms, 6, 1.5, 5, keep);   /* an untimed default is not kept either */
  bool want[] = {false, false, true, true, false, false};
  for (int i = 0; i < 6; i++) ck_assert_msg(keep[i] == want[i], "candidate %d", i);
  ck_assert_int_eq(n, 2);
  double none[] = {-1, -1};
  ck_assert_int_eq(fa_tune_screen(none, 2, 1.5, 0, keep), 0);
  ck_assert(!keep[0] && !keep[1]);
}
END_TEST

START_TEST(screen_equal_times_all_kept) {
  double ms[] = {1.5, 1.5, 1.5, 1.5};
  bool keep[4];
  ck_assert_int_eq(fa_tune_screen(ms, 4, 1.5, -1, keep), 4);
}
END_TEST

START_TEST(screen_noise_does_not_drop_close_ones) {
  /* five runs of a noisy 1.0 ms kernel: a 1.3 ms screening median is kept */
  double ms[] = {1.0, 1.3, 1.05, 1.49};
  bool keep[4];
  ck_assert_int_eq(fa_tune_screen(ms, 4, TUNE_SCREEN_FACTOR, -1, keep), 4);
}
END_TEST

START_TEST(median_odd_even) {
  double a[] = {5, 1, 3};
  ck_assert(fa_tune_median(a, 3) == 3);
  ck_assert(a[0] == 1 && a[2] == 5);   /* sorted: min and max at the ends */
  double b[] = {4, 1, 3, 2};
  ck_assert(fa_tune_median(b, 4) == 2.5);
  double c[] = {7};
  ck_assert(fa_tune_median(c, 1) == 7);
  ck_assert(fa_tune_median(c, 0) == 0);
  /* one outlier does not move the median of 20 */
  double t[20];
  for (int i = 0; i < 20; i++) t[i] = 1.0 + 0.001 * i;
  t[7] = 50;
  ck_assert(fabs(fa_tune_median(t, 20) - 1.0105) < 1e-9);
}
END_TEST

/* ---- generated data ---------------------------------------------------------------------- */

START_TEST(fill_independent_of_threads_and_ranges) {
  const DType types[] = {DT_F16, DT_BF16, DT_F32, DT_F64, DT_I32};
  const TuneFill fills[] = {TUNE_FILL_RANDN, TUNE_FILL_RAND};
  size_t n = 300000 + 17;   /* several generator chunks and a partial one */
  for (int t = 0; t < 5; t++)
    for (int f = 0; f < 2; f++) {
      size_t es = (size_t)fa_dtype_size(types[t]);
      unsigned char *a = malloc(n * es), *b = malloc(n * es), *c = malloc(n * es);
      ck_assert(a && b && c);
      fa_tune_fill(a, types[t], n, fills[f], 42);
      fa_tune_fill_range(b, types[t], 0, n, fills[f], 42, 7);
      ck_assert_msg(!memcmp(a, b, n * es), "dtype %d fill %d: 7 threads differ from 1", t, f);
      /* in pieces, at odd offsets */
      size_t cuts[] = {0, 1, 1000, 65536, 65537, 200001, n};
      for (int k = 0; k + 1 < 7; k++)
        fa_tune_fill_range(c + cuts[k] * es, types[t], cuts[k], cuts[k + 1] - cuts[k], fills[f], 42, 3);
      ck_assert_msg(!memcmp(a, c, n * es), "dtype %d fill %d: pieces differ from the whole", t, f);
      /* another seed, other numbers */
      fa_tune_fill(b, types[t], n, fills[f], 43);
      ck_assert(memcmp(a, b, n * es) != 0);
      free(a);
      free(b);
      free(c);
    }
}
END_TEST

START_TEST(fill_randn_is_standard_normal) {
  size_t n = 1 << 20;
  float *x = malloc(n * sizeof *x);
  ck_assert_ptr_nonnull(x);
  fa_tune_fill_range(x, DT_F32, 0, n, TUNE_FILL_RANDN, 1, 2);
  double sum = 0, sum2 = 0, sum4 = 0;
  size_t beyond2 = 0;
  for (size_t i = 0; i < n; i++) {
    ck_assert(isfinite(x[i]));
    sum += x[i];
    sum2 += (double)x[i] * x[i];
    sum4 += (double)x[i] * x[i] * x[i] * x[i];
    beyond2 += fabsf(x[i]) > 2;
  }
  double mean = sum / n, var = sum2 / n - mean * mean, kurt = sum4 / n / (var * var);
  ck_assert_msg(fabs(mean) < 0.01, "mean %g", mean);
  ck_assert_msg(fabs(var - 1) < 0.01, "variance %g", var);
  ck_assert_msg(fabs(kurt - 3) < 0.05, "kurtosis %g (normal: 3)", kurt);
  double frac = (double)beyond2 / n;   /* P(|x| > 2) = 0.0455 */
  ck_assert_msg(fabs(frac - 0.0455) < 0.002, "P(|x| > 2) = %g", frac);
  free(x);
}
END_TEST

START_TEST(fill_rand_and_f16_values) {
  size_t n = 1 << 18;
  float *x = malloc(n * sizeof *x);
  uint16_t *h = malloc(n * sizeof *h);
  ck_assert(x && h);
  fa_tune_fill_range(x, DT_F32, 0, n, TUNE_FILL_RAND, 5, 2);
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    ck_assert(x[i] >= 0 && x[i] < 1);
    sum += x[i];
  }
  ck_assert_msg(fabs(sum / n - 0.5) < 0.01, "mean %g", sum / n);
  /* the f16 buffer holds the same values, rounded */
  fa_tune_fill_range(x, DT_F32, 0, n, TUNE_FILL_RANDN, 9, 1);
  fa_tune_fill_range(h, DT_F16, 0, n, TUNE_FILL_RANDN, 9, 4);
  for (size_t i = 0; i < n; i++) {
    double v = fa_tune_load_element(h, DT_F16, i);
    ck_assert_msg(fabs(v - x[i]) <= fabs(x[i]) * 0x1p-11 + 0x1p-24, "element %zu: %g vs %g", i, v, x[i]);
  }
  free(x);
  free(h);
}
END_TEST

START_TEST(fill_empty_is_nan) {
  const DType types[] = {DT_F16, DT_BF16, DT_F32, DT_F64};
  unsigned char buf[64];
  for (int t = 0; t < 4; t++) {
    fa_tune_fill(buf, types[t], 4, TUNE_FILL_EMPTY, 1);
    for (int i = 0; i < 4; i++) ck_assert_msg(isnan(fa_tune_load_element(buf, types[t], (size_t)i)), "dtype %d", t);
  }
  fa_tune_fill(buf, DT_I32, 4, TUNE_FILL_EMPTY, 1);
  ck_assert(fa_tune_load_element(buf, DT_I32, 3) == -1);
  fa_tune_fill(buf, DT_F16, 8, TUNE_FILL_ZEROS, 1);
  for (int i = 0; i < 16; i++) ck_assert_int_eq(buf[i], 0);
}
END_TEST

/* ---- comparing outputs ------------------------------------------------------------------ */

START_TEST(compare_f16) {
  /* small and large (the large one goes through a conversion table) */
  const size_t sizes[] = {10000 + 3, 70000 + 3};
  for (int k = 0; k < 2; k++) {
    size_t n = sizes[k], changed = n - 1000, nan_at = n - 2;
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
    ck_assert(a && b);
    fa_tune_fill(a, DT_F16, n, TUNE_FILL_RANDN, 3);
    memcpy(b, a, n * 2);
    TuneCompare cmp;
    fa_tune_compare(a, b, DT_F16, n, &cmp);
    ck_assert(cmp.rel_err == 0 && cmp.nonfinite_mismatch == 0);
    /* one element changed: the error and its place */
    b[changed] ^= 0x0200;   /* a mantissa bit */
    fa_tune_compare(a, b, DT_F16, n, &cmp);
    ck_assert(cmp.rel_err > 0 && cmp.rel_err < 1e-2);
    ck_assert_uint_eq(cmp.first_bad, changed);
    /* the error is ||a - b|| / ||b||, b being the reference */
    double x = fa_tune_load_element(a, DT_F16, changed), y = fa_tune_load_element(b, DT_F16, changed);
    double norm = 0;
    for (size_t i = 0; i < n; i++) norm += fa_tune_load_element(b, DT_F16, i) * fa_tune_load_element(b, DT_F16, i);
    ck_assert(fabs(cmp.rel_err - fabs(x - y) / sqrt(norm)) < 1e-9);
    /* NaN in one, finite in the other */
    b[nan_at] = 0x7e00;
    fa_tune_compare(a, b, DT_F16, n, &cmp);
    ck_assert_uint_eq(cmp.nonfinite_mismatch, 1);
    ck_assert_uint_eq(cmp.first_bad, nan_at);
    /* the same NaN (all-ones) in both is agreement */
    a[nan_at] = 0xffff;
    fa_tune_compare(a, b, DT_F16, n, &cmp);
    ck_assert_uint_eq(cmp.nonfinite_mismatch, 0);
    free(a);
    free(b);
  }
  /* subnormals and infinities load exactly */
  uint16_t s[] = {0x0001, 0x03ff, 0x7c00, 0xfc00, 0x3c00, 0xc000};
  ck_assert(fa_tune_load_element(s, DT_F16, 0) == 0x1p-24);
  ck_assert(fa_tune_load_element(s, DT_F16, 1) == 1023 * 0x1p-24);
  ck_assert(isinf(fa_tune_load_element(s, DT_F16, 2)) && fa_tune_load_element(s, DT_F16, 2) > 0);
  ck_assert(isinf(fa_tune_load_element(s, DT_F16, 3)) && fa_tune_load_element(s, DT_F16, 3) < 0);
  ck_assert(fa_tune_load_element(s, DT_F16, 4) == 1.0);
  ck_assert(fa_tune_load_element(s, DT_F16, 5) == -2.0);
}
END_TEST

START_TEST(compare_in_threads) {
  /* large enough for several parts: the same answer as one thread */
  size_t n = 3u << 20;
  uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
  ck_assert(a && b);
  fa_tune_fill_range(a, DT_BF16, 0, n, TUNE_FILL_RANDN, 11, 2);
  fa_tune_fill_range(b, DT_BF16, 0, n, TUNE_FILL_RANDN, 11, 2);
  for (size_t i = 0; i < n; i += 997) b[i] ^= 1;   /* small differences everywhere */
  b[2500000] ^= 0x0040;                              /* the largest, in a later part */
  TuneCompare one, four;
  fa_tune_compare(a, b, DT_BF16, n, &one);
  fa_tune_compare_threads(a, b, DT_BF16, n, 4, &four);
  ck_assert_uint_eq(one.first_bad, 2500000);
  ck_assert_uint_eq(four.first_bad, one.first_bad);
  ck_assert(fabs(four.rel_err - one.rel_err) <= 1e-12 * one.rel_err);
  /* non-finite mismatches in two parts: the first one is reported */
  b[3000000] = 0x7fc0;
  b[100] = 0x7fc0;
  fa_tune_compare_threads(a, b, DT_BF16, n, 4, &four);
  ck_assert_uint_eq(four.nonfinite_mismatch, 2);
  ck_assert_uint_eq(four.first_bad, 100);
  free(a);
  free(b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tune_timing");
  TCase *tc = tcase_create("timing");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, screen_keeps_those_within_the_factor);
  tcase_add_test(tc, screen_always_keeps_the_default);
  tcase_add_test(tc, screen_skips_untimed);
  tcase_add_test(tc, screen_equal_times_all_kept);
  tcase_add_test(tc, screen_noise_does_not_drop_close_ones);
  tcase_add_test(tc, median_odd_even);
  tcase_add_test(tc, fill_independent_of_threads_and_ranges);
  tcase_add_test(tc, fill_randn_is_standard_normal);
  tcase_add_test(tc, fill_rand_and_f16_values);
  tcase_add_test(tc, fill_empty_is_nan);
  tcase_add_test(tc, compare_f16);
  tcase_add_test(tc, compare_in_threads);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
