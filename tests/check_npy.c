/* check_npy.c - the .npy reader and writer: round trips of every supported
 * dtype, a header exactly as NumPy writes it, and the refusals (Fortran
 * order, big-endian, unsupported dtypes, truncated files). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interp.h"
#include "npy.h"

static char tmpdir[64];

static void setup(void) {
  strcpy(tmpdir, "/tmp/fadsl-npy-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
}

static const char *path(const char *name) {
  static char buf[128];
  snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
  return buf;
}

static void write_bytes(const char *p, const void *data, size_t n) {
  FILE *f = fopen(p, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, n, f), n);
  fclose(f);
}

/* A file laid out the way numpy.save writes np.arange(6, dtype='<f4').reshape(2, 3). */
static size_t numpy_file(unsigned char *out, const char *descr, const char *order, const char *shape, const void *data,
                         size_t nbytes) {
  char hdr[256];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, order, shape);
  while ((10 + n + 1) % 64)
    hdr[n++] = ' ';
  hdr[n++] = '\n';
  memcpy(out, "\x93NUMPY\x01\x00", 8);
  out[8] = (unsigned char)(n & 0xff);
  out[9] = (unsigned char)(n >> 8);
  memcpy(out + 10, hdr, (size_t)n);
  memcpy(out + 10 + n, data, nbytes);
  return 10 + (size_t)n + nbytes;
}

START_TEST(test_read_numpy_layout) {
  float v[6] = {0, 1, 2, 3, 4, 5};
  unsigned char bytes[512];
  size_t n = numpy_file(bytes, "<f4", "False", "(2, 3)", v, sizeof v);
  ck_assert_uint_eq((n - sizeof v) % 64, 0);
  write_bytes(path("a.npy"), bytes, n);
  FaNpy a;
  char err[256];
  ck_assert_msg(fa_npy_read(path("a.npy"), &a, err, sizeof err), "%s", err);
  ck_assert_int_eq(a.dtype, DT_F32);
  ck_assert_int_eq(a.ndim, 2);
  ck_assert_int_eq(a.shape[0], 2);
  ck_assert_int_eq(a.shape[1], 3);
  ck_assert_int_eq(a.count, 6);
  ck_assert(((float *)a.data)[5] == 5.0f);
  fa_npy_free(&a);
  /* 1-d and 0-d shapes */
  n = numpy_file(bytes, "<f4", "False", "(6,)", v, sizeof v);
  write_bytes(path("b.npy"), bytes, n);
  ck_assert(fa_npy_read(path("b.npy"), &a, err, sizeof err));
  ck_assert_int_eq(a.ndim, 1);
  ck_assert_int_eq(a.count, 6);
  fa_npy_free(&a);
  n = numpy_file(bytes, "<f4", "False", "()", v, 4);
  write_bytes(path("c.npy"), bytes, n);
  ck_assert(fa_npy_read(path("c.npy"), &a, err, sizeof err));
  ck_assert_int_eq(a.ndim, 0);
  ck_assert_int_eq(a.count, 1);
  fa_npy_free(&a);
}
END_TEST

/* format 2.0: a 4-byte header length */
START_TEST(test_read_version2) {
  int64_t v[3] = {-1, 0, 1LL << 40};
  unsigned char bytes[256];
  char hdr[128];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }");
  while ((12 + n + 1) % 64)
    hdr[n++] = ' ';
  hdr[n++] = '\n';
  memcpy(bytes, "\x93NUMPY\x02\x00", 8);
  bytes[8] = (unsigned char)n;
  bytes[9] = bytes[10] = bytes[11] = 0;
  memcpy(bytes + 12, hdr, (size_t)n);
  memcpy(bytes + 12 + n, v, sizeof v);
  write_bytes(path("v2.npy"), bytes, 12 + (size_t)n + sizeof v);
  FaNpy a;
  char err[256];
  ck_assert_msg(fa_npy_read(path("v2.npy"), &a, err, sizeof err), "%s", err);
  ck_assert_int_eq(a.dtype, DT_I64);
  ck_assert_int_eq(a.count, 3);
  ck_assert(((int64_t *)a.data)[2] == (1LL << 40));
  fa_npy_free(&a);
}
END_TEST

START_TEST(test_refusals) {
  float v[6] = {0};
  unsigned char bytes[512];
  FaNpy a;
  char err[256];
  struct {
    const char *descr, *order, *shape;
    size_t nbytes;
    const char *msg;
  } cases[] = {
      {"<f4", "True", "(2, 3)", 24, "Fortran order"},
      {">f4", "False", "(2, 3)", 24, "big-endian"},
      {"<u2", "False", "(2, 3)", 12, "not supported"},
      {"<c8", "False", "(3,)", 24, "not supported"},
      {"<f4", "False", "(2, 3)", 20, "need 24"},
  };
  for (int i = 0; i < 5; i++) {
    size_t n = numpy_file(bytes, cases[i].descr, cases[i].order, cases[i].shape, v, cases[i].nbytes);
    write_bytes(path("bad.npy"), bytes, n);
    ck_assert(!fa_npy_read(path("bad.npy"), &a, err, sizeof err));
    ck_assert_msg(strstr(err, cases[i].msg), "case %d: '%s' lacks '%s'", i, err, cases[i].msg);
    ck_assert_msg(strstr(err, "bad.npy"), "message names the file: %s", err);
  }
  write_bytes(path("junk.npy"), "hello world", 11);
  ck_assert(!fa_npy_read(path("junk.npy"), &a, err, sizeof err));
  ck_assert(strstr(err, "not a .npy file"));
  write_bytes(path("empty.npy"), "", 0);
  ck_assert(!fa_npy_read(path("empty.npy"), &a, err, sizeof err));
  ck_assert_msg(strstr(err, "empty.npy: not a .npy file (the file is empty)"), "%s", err);
  ck_assert(!fa_npy_read(path("missing.npy"), &a, err, sizeof err));
  ck_assert_msg(strstr(err, "missing.npy: No such file"), "%s", err);
  /* cut short: in the magic, in the header, in the data */
  size_t n = numpy_file(bytes, "<f4", "False", "(2, 3)", v, 24);
  size_t cuts[3] = {7, 40, n - 5};
  const char *want[3] = {"truncated .npy file (7 bytes", "truncated .npy file (40 bytes",
                         "truncated .npy file: holds 19 bytes of data, but its shape and dtype (6 elements of float32) "
                         "need 24"};
  for (int i = 0; i < 3; i++) {
    write_bytes(path("cut.npy"), bytes, cuts[i]);
    ck_assert(!fa_npy_read(path("cut.npy"), &a, err, sizeof err));
    ck_assert_msg(strstr(err, "cut.npy: ") && strstr(err, want[i]), "cut at %zu: %s", cuts[i], err);
  }
}
END_TEST

START_TEST(test_round_trips) {
  int64_t shape[3] = {2, 3, 4};
  DType dts[6] = {DT_F16, DT_F32, DT_F64, DT_I32, DT_I64, DT_I1};
  for (int t = 0; t < 6; t++) {
    int esize = fa_dtype_size(dts[t]);
    unsigned char *data = malloc(24 * (size_t)esize);
    for (int i = 0; i < 24; i++)
      fa_host_set(dts[t], data, i, dts[t] == DT_I1 ? (i % 3 == 0) : (i - 7) * 0.5 * (fa_dtype_is_float(dts[t]) ? 1 : 2));
    char err[256];
    ck_assert_msg(fa_npy_write(path("rt.npy"), dts[t], 3, shape, data, err, sizeof err), "%s", err);
    FaNpy a;
    ck_assert_msg(fa_npy_read(path("rt.npy"), &a, err, sizeof err), "%s", err);
    ck_assert_int_eq(a.dtype, dts[t]);
    ck_assert_int_eq(a.ndim, 3);
    ck_assert_int_eq(a.shape[2], 4);
    ck_assert(memcmp(a.data, data, 24 * (size_t)esize) == 0);
    fa_npy_free(&a);
    free(data);
  }
  /* the data starts at a multiple of 64 bytes */
  FILE *f = fopen(path("rt.npy"), "rb");
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fclose(f);
  ck_assert_int_eq((len - 24) % 64, 0);
}
END_TEST

START_TEST(test_conversions) {
  /* float32 -> f16 / bf16 rounds to nearest even; back is exact */
  float in[4] = {1.0f + 0x1p-11f, 0.1f, 1.0f + 0x1p-8f, -65520.0f};
  uint16_t h[4], b[4];
  fa_host_convert(DT_F32, in, DT_F16, h, 4);
  fa_host_convert(DT_F32, in, DT_BF16, b, 4);
  ck_assert_uint_eq(h[0], 0x3c00);
  ck_assert_uint_eq(h[1], 0x2e66);
  ck_assert_uint_eq(h[3], 0xfc00);
  ck_assert_uint_eq(b[2], 0x3f80);
  ck_assert_uint_eq(b[1], 0x3dcd);
  float back[4];
  fa_host_convert(DT_F16, h, DT_F32, back, 4);
  ck_assert(back[1] == 0.0999755859375f);
  fa_host_convert(DT_BF16, b, DT_F32, back, 4);
  ck_assert(back[1] == 0.10009765625f);
  /* float -> int truncates */
  double d[3] = {2.7, -2.7, 1e30};
  int32_t i[3];
  fa_host_convert(DT_F64, d, DT_I32, i, 3);
  ck_assert_int_eq(i[0], 2);
  ck_assert_int_eq(i[1], -2);
  ck_assert_int_eq(i[2], INT32_MAX);
}
END_TEST

int main(void) {
  Suite *s = suite_create("npy");
  TCase *tc = tcase_create("npy");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_read_numpy_layout);
  tcase_add_test(tc, test_read_version2);
  tcase_add_test(tc, test_refusals);
  tcase_add_test(tc, test_round_trips);
  tcase_add_test(tc, test_conversions);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
